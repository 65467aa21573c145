//! `Subscription.sessionEvents` over `/graphql/ws`: the protocols and their close codes,
//! visibility, resume, overflow, and replicas sharing one PostgreSQL.

use std::time::Duration;

use serde_json::{Value, json};

use sessiond::config::{HttpLimits, WsLimits};

use crate::db_tests;
use crate::support::ws::{EVENTS, LEGACY_WS, TRANSPORT_WS, Ws, codes};
use crate::support::{Backend, TestApp, launch_input, project};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const LAUNCH_MANY: &str =
    "mutation($i: LaunchSessionInput!, $n: Int!) { launchSessions(input: $i, count: $n) { sessions { id } } }";
const TERMINATE: &str = "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }";

/// Launches one session as `token` in the demo project `default`; returns its id.
async fn launch(app: &TestApp, token: &str, name: &str) -> String {
    let resp = app.gql(Some(token), LAUNCH, json!({"i": launch_input(name, 1.0)})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

async fn terminate(app: &TestApp, token: &str, ids: &[String]) {
    let resp = app.gql(Some(token), TERMINATE, json!({"ids": ids})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
}

/// The status transitions of alice's session `id`, oldest first.
async fn timeline(app: &TestApp, id: &str) -> Vec<Value> {
    let query = "query($id: ID!) { session(id: $id) { statusTransitions { cursor toStatus } } }";
    let detail = app.gql(Some("demo-alice"), query, json!({"id": id})).await;
    detail["data"]["session"]["statusTransitions"].as_array().unwrap_or_else(|| panic!("{detail}")).clone()
}

fn default_project() -> String {
    project("default/default")
}

fn limits(ws: WsLimits) -> HttpLimits {
    HttpLimits { ws, ..HttpLimits::default() }
}

async fn a_launched_session_is_followed_from_pending_to_terminated(mut app: TestApp) {
    app.start_workers();
    let addr = app.serve().await;
    let mut ws = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    assert_eq!(ws.protocol.as_deref(), Some(TRANSPORT_WS), "the server names the protocol it serves");
    ws.init("demo-alice").await;
    // From the current cursor: whenever the subscription starts, nothing after it is missed.
    ws.subscribe("s", EVENTS, json!({"p": default_project(), "after": app.last_cursor().await})).await;
    let id = launch(&app, "demo-alice", "live-1").await;
    let mut events = vec![ws.next_event("s").await];
    while events.last().expect("one")["toStatus"] != "RUNNING" {
        events.push(ws.next_event("s").await);
    }
    terminate(&app, "demo-alice", std::slice::from_ref(&id)).await;
    while events.last().expect("one")["toStatus"] != "TERMINATED" {
        events.push(ws.next_event("s").await);
    }
    let first = &events[0];
    assert_eq!((first["fromStatus"].clone(), first["toStatus"].as_str()), (Value::Null, Some("PENDING")), "{first}");
    for pair in events.windows(2) {
        assert_eq!(pair[1]["fromStatus"], pair[0]["toStatus"], "each change starts where the last ended");
        let (a, b) = (pair[0]["cursor"].as_str().expect("c"), pair[1]["cursor"].as_str().expect("c"));
        assert!(a.parse::<i64>().expect("n") < b.parse::<i64>().expect("n"), "cursors grow: {a} {b}");
    }
    for e in &events {
        assert_eq!(e["sessionId"], json!(id));
        assert_eq!((e["session"]["id"].clone(), e["session"]["name"].as_str()), (json!(id), Some("live-1")));
        assert_eq!(e["session"]["owner"]["email"], "alice@example.com");
    }
    // Exactly the session's timeline: no change missed, none twice.
    let timeline: Vec<(Value, Value)> =
        timeline(&app, &id).await.iter().map(|t| (t["cursor"].clone(), t["toStatus"].clone())).collect();
    let seen: Vec<(Value, Value)> = events.iter().map(|e| (e["cursor"].clone(), e["toStatus"].clone())).collect();
    assert_eq!(seen, timeline);
    let statuses: Vec<&str> = events.iter().filter_map(|e| e["toStatus"].as_str()).collect();
    assert!(statuses.ends_with(&["RUNNING", "TERMINATING", "TERMINATED"]), "{statuses:?}");
    // `complete` from the client ends the operation quietly; the connection stays usable.
    ws.send(json!({"type": "complete", "id": "s"})).await;
    ws.send(json!({"type": "ping"})).await;
    assert_eq!(ws.recv().await["type"], "pong");
}

async fn the_legacy_protocol_is_served_too(app: TestApp) {
    let mut app = app;
    let addr = app.serve().await;
    let mut ws = Ws::connect(addr, Some(LEGACY_WS)).await;
    assert_eq!(ws.protocol.as_deref(), Some(LEGACY_WS));
    ws.send(json!({"type": "connection_init", "payload": {"authorization": "Bearer demo-alice"}})).await;
    assert_eq!(ws.recv().await["type"], "connection_ack");
    let variables = json!({"p": default_project(), "after": app.last_cursor().await});
    let start = json!({"type": "start", "id": "1", "payload": {"query": EVENTS, "variables": variables}});
    ws.send(start).await;
    // A query in the same connection shows the start was handled before the launch.
    ws.send(json!({"type": "start", "id": "q", "payload": {"query": "{ viewer { user { email } } }"}})).await;
    let data = ws.recv_skipping_ka().await;
    assert_eq!((data["type"].as_str(), data["id"].as_str()), (Some("data"), Some("q")), "{data}");
    assert_eq!(data["payload"]["data"]["viewer"]["user"]["email"], "alice@example.com");
    assert_eq!(ws.recv_skipping_ka().await, json!({"type": "complete", "id": "q"}));
    launch(&app, "demo-alice", "legacy-1").await;
    let m = ws.recv_skipping_ka().await;
    assert_eq!((m["type"].as_str(), m["id"].as_str()), (Some("data"), Some("1")), "{m}");
    assert_eq!(m["payload"]["data"]["sessionEvents"]["toStatus"], "PENDING");
    ws.send(json!({"type": "stop", "id": "1"})).await;
    assert_eq!(ws.recv_skipping_ka().await, json!({"type": "complete", "id": "1"}));
    ws.send(json!({"type": "connection_terminate"})).await;
    assert_eq!(ws.closed().await.0, 1000);
    // A bad token: `connection_error`, then the close.
    let mut ws = Ws::connect(addr, Some(LEGACY_WS)).await;
    ws.send(json!({"type": "connection_init", "payload": {"authorization": "Bearer nope"}})).await;
    assert_eq!(ws.recv().await["type"], "connection_error");
    assert_eq!(ws.closed().await.0, 4403);
}

async fn every_close_code_of_the_protocol(app: TestApp) {
    let ws_limits = WsLimits { ws_init_timeout_ms: 300, max_ws_connections: 3, ..WsLimits::default() };
    let mut app = app.reopen_with(limits(ws_limits)).await;
    let addr = app.serve().await;
    let init =
        |token: &str| json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {token}")}});
    let sub = |id: &str| json!({"type": "subscribe", "id": id, "payload": {"query": EVENTS, "variables": {"p": default_project()}}});

    // 4403: a bad token, or none.
    for payload in [init("nope"), json!({"type": "connection_init"}), json!({"type": "connection_init", "payload": {}})]
    {
        let mut ws = Ws::connect(addr, Some(TRANSPORT_WS)).await;
        ws.send(payload.clone()).await;
        assert_eq!(ws.closed().await.0, 4403, "{payload}");
    }
    // 4401: an operation before connection_ack.
    let mut ws = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    ws.send(sub("a")).await;
    assert_eq!(ws.closed().await.0, 4401);
    // 4408: no connection_init in time.
    let mut ws = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    assert_eq!(ws.closed().await.0, 4408);
    // 4429: a second connection_init.
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.send(init("demo-alice")).await;
    assert_eq!(ws.closed().await.0, 4429);
    // 4409: an id that is already running.
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.send(sub("same")).await;
    ws.send(sub("same")).await;
    let (code, reason) = ws.closed().await;
    assert_eq!((code, reason.as_str()), (4409, "Subscriber for same already exists"));
    // 4400: anything we cannot understand.
    for bad in [
        "not json".to_owned(),
        json!({"no": "type"}).to_string(),
        json!({"type": "launch_missiles"}).to_string(),
        json!({"type": "subscribe", "id": "x"}).to_string(),
        json!({"type": "subscribe", "payload": {"query": "{ __typename }"}}).to_string(),
        json!({"type": "subscribe", "id": "i".repeat(129), "payload": {"query": "{ __typename }"}}).to_string(),
        // A reason too long for a close frame is cut, and the code still arrives.
        json!({"type": "x".repeat(10_000)}).to_string(),
    ] {
        let mut ws = Ws::open(addr, "demo-alice").await;
        ws.send_text(&bad).await;
        assert_eq!(ws.closed().await.0, 4400, "{bad}");
    }
    // 4406: no subprotocol we speak.
    let mut ws = Ws::connect(addr, None).await;
    assert_eq!(ws.closed().await.0, 4406);
    // 1013: over --max-ws-connections (3), counted once authenticated; a slot frees when a
    // connection closes.
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(Ws::open(addr, "demo-alice").await);
    }
    let mut ws = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    ws.send(init("demo-bob")).await;
    let (code, reason) = ws.closed().await;
    assert_eq!(code, 1013, "{reason}");
    assert!(reason.contains("at most 3"), "{reason}");
    drop(open.pop());
    let mut again = None;
    for _ in 0..100 {
        let mut ws = Ws::connect(addr, Some(TRANSPORT_WS)).await;
        ws.send(init("demo-alice")).await;
        if ws.next_within(Duration::from_secs(5)).await.is_ok_and(|m| m["type"] == "connection_ack") {
            again = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "a closed connection frees its slot");
}

async fn limits_on_operations_and_silent_peers(app: TestApp) {
    let ws_limits = WsLimits {
        max_subscriptions_per_connection: 1,
        ws_keepalive_ms: 100,
        ws_keepalive_timeout_ms: 400,
        ..WsLimits::default()
    };
    let mut app = app.reopen_with(limits(ws_limits)).await;
    let addr = app.serve().await;
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.subscribe("one", EVENTS, json!({"p": default_project(), "after": app.last_cursor().await})).await;
    ws.subscribe("two", EVENTS, json!({"p": default_project()})).await;
    let errors = ws.error_of("two").await;
    assert_eq!(codes(&errors), ["LIMIT_EXCEEDED"], "{errors:?}");
    // One subscription, one root field: aliases cannot open several feeds in one operation.
    let mut other = Ws::open(addr, "demo-alice").await;
    let twice = "subscription($p: ID!) { a: sessionEvents(projectId: $p) { cursor } b: sessionEvents(projectId: $p) { cursor } }";
    other.subscribe("two", twice, json!({"p": default_project()})).await;
    assert_eq!(codes(&other.error_of("two").await), ["GRAPHQL_VALIDATION_FAILED"]);
    // The first still runs and the connection stays.
    launch(&app, "demo-alice", "limit-1").await;
    assert_eq!(ws.next_event("one").await["toStatus"], "PENDING");
    // A peer that answers no ping is dropped after the keepalive timeout: this client
    // reads nothing (so it answers no ping) for 800 ms. The server closes at about 500 ms
    // and keeps the socket for its close handshake until about 1 500 ms, so the close frame
    // is still there to read.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (code, reason) = ws.closed().await;
    assert_eq!(code, 1001, "{reason}");
}

async fn each_viewer_gets_only_what_the_list_would_show(mut app: TestApp) {
    let addr = app.serve().await;
    let p = default_project();
    // Refusals are those of the session list.
    let mut carol = Ws::open(addr, "demo-carol").await;
    carol.subscribe("c", EVENTS, json!({"p": p})).await;
    assert_eq!(codes(&carol.error_of("c").await), ["NOT_FOUND"]);
    let mut alice = Ws::open(addr, "demo-alice").await;
    alice.subscribe("all", EVENTS, json!({"p": p, "scope": "PROJECT"})).await;
    assert_eq!(codes(&alice.error_of("all").await), ["FORBIDDEN"]);

    let start = app.last_cursor().await;
    let mut bob = Ws::open(addr, "demo-bob").await;
    bob.subscribe("b", EVENTS, json!({"p": p, "after": start})).await;
    let mut admin = Ws::open(addr, "demo-admin").await;
    admin.subscribe("a", EVENTS, json!({"p": p, "scope": "PROJECT", "after": start})).await;
    let a1 = launch(&app, "demo-alice", "vis-a1").await;
    // One session of alice's: only its events, and only for those who may see it.
    alice.subscribe("one", EVENTS, json!({"p": p, "sid": a1, "after": app.last_cursor().await})).await;
    for (token, scope) in [("demo-bob", "MINE"), ("demo-carol", "MINE"), ("demo-admin", "MINE")] {
        let mut ws = Ws::open(addr, token).await;
        ws.subscribe("x", EVENTS, json!({"p": p, "sid": a1, "scope": scope})).await;
        assert_eq!(codes(&ws.error_of("x").await), ["NOT_FOUND"], "{token} {scope}");
    }
    let a2 = launch(&app, "demo-alice", "vis-a2").await;
    terminate(&app, "demo-alice", std::slice::from_ref(&a1)).await;
    let b1 = launch(&app, "demo-bob", "vis-b1").await;

    let got: Vec<(String, String)> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            let e = admin.next_event("a").await;
            v.push((e["sessionId"].as_str().expect("id").to_owned(), e["toStatus"].as_str().expect("s").to_owned()));
        }
        v
    };
    let expect = |id: &String, s: &str| (id.clone(), s.to_owned());
    assert_eq!(got, [expect(&a1, "PENDING"), expect(&a2, "PENDING"), expect(&a1, "CANCELLED"), expect(&b1, "PENDING")]);
    // Bob's first event is his own launch: alice's three came before it and were not sent.
    let e = bob.next_event("b").await;
    assert_eq!((e["sessionId"].as_str(), e["toStatus"].as_str()), (Some(b1.as_str()), Some("PENDING")));
    // Alice's one-session feed: the cancellation of a1, nothing of a2.
    let e = alice.next_event("one").await;
    assert_eq!((e["sessionId"].as_str(), e["toStatus"].as_str()), (Some(a1.as_str()), Some("CANCELLED")));
    assert_eq!(alice.is_quiet(Duration::from_millis(300)).await, Ok(()));
}

async fn a_resumed_subscription_replays_exactly_what_it_missed(mut app: TestApp) {
    let addr = app.serve().await;
    let p = default_project();
    let mut first = Ws::open(addr, "demo-alice").await;
    first.subscribe("s", EVENTS, json!({"p": p, "after": app.last_cursor().await})).await;
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": launch_input("resume", 1.0), "n": 3})).await;
    let ids: Vec<String> = resp["data"]["launchSessions"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{resp}"))
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_owned())
        .collect();
    terminate(&app, "demo-alice", &ids).await;
    let mut cursors = Vec::new();
    for _ in 0..6 {
        cursors.push(first.next_event("s").await["cursor"].as_str().expect("cursor").to_owned());
    }
    drop(first);
    // Resume after the second: the four others, in order, then live events.
    let mut again = Ws::open(addr, "demo-alice").await;
    again.subscribe("s", EVENTS, json!({"p": p, "after": cursors[1]})).await;
    let mut replayed = Vec::new();
    for _ in 0..4 {
        replayed.push(again.next_event("s").await["cursor"].as_str().expect("cursor").to_owned());
    }
    assert_eq!(replayed, cursors[2..]);
    let later = launch(&app, "demo-alice", "r-later").await;
    let e = again.next_event("s").await;
    assert_eq!((e["sessionId"].as_str(), e["toStatus"].as_str()), (Some(later.as_str()), Some("PENDING")));
    assert_eq!(again.is_quiet(Duration::from_millis(300)).await, Ok(()), "nothing twice");
    // A cursor from a session's timeline resumes too.
    let timeline_cursor = timeline(&app, &ids[2]).await[1]["cursor"].clone();
    again.subscribe("t", EVENTS, json!({"p": p, "after": timeline_cursor})).await;
    let e = again.next_event("t").await;
    assert_eq!(e["toStatus"], "PENDING", "{e}");
    assert_eq!(e["sessionId"].as_str(), Some(later.as_str()));
    // Malformed and future cursors are bad input on `after`.
    let future = (cursors[5].parse::<i64>().expect("n") + 1000).to_string();
    for (id, bad) in [("b1", "abc"), ("b2", "-1"), ("b3", future.as_str())] {
        again.subscribe(id, EVENTS, json!({"p": p, "after": bad})).await;
        let errors = again.error_of(id).await;
        assert_eq!(codes(&errors), ["BAD_USER_INPUT"], "{bad}");
        assert_eq!(errors[0]["extensions"]["field"], "after");
    }
}

async fn a_consumer_that_falls_behind_gets_lagged_and_resumes(app: TestApp) {
    let ws_limits = WsLimits { subscription_buffer: 2, ..WsLimits::default() };
    let mut app = app.reopen_with(limits(ws_limits)).await;
    let addr = app.serve().await;
    let p = default_project();
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.subscribe("s", EVENTS, json!({"p": p, "after": app.last_cursor().await})).await;
    // One event first: once it is delivered the feed has left its replay and follows the bus.
    let warm = launch(&app, "demo-alice", "warm").await;
    assert_eq!(ws.next_event("s").await["sessionId"], json!(warm));
    // Eight transitions are fanned out at once: far more than the buffer of two.
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": launch_input("lagging", 0.5), "n": 8})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let mut seen = Vec::new();
    let lagged = loop {
        let m = ws.recv().await;
        match m["type"].as_str() {
            Some("next") => seen.push(m["payload"]["data"]["sessionEvents"]["sessionId"].clone()),
            Some("error") => break m["payload"][0].clone(),
            _ => panic!("{m}"),
        }
    };
    assert_eq!(lagged["extensions"]["code"], "LAGGED", "{lagged}");
    let cursor = lagged["extensions"]["cursor"].as_str().expect("the last delivered cursor").to_owned();
    assert!(seen.len() < 8, "it lagged before the end");
    ws.subscribe("s", EVENTS, json!({"p": p, "after": cursor})).await;
    while seen.len() < 8 {
        seen.push(ws.next_event("s").await["sessionId"].clone());
    }
    let mut unique = seen.clone();
    unique.sort_by_key(Value::to_string);
    unique.dedup();
    assert_eq!(unique.len(), 8, "every launch once, none twice: {seen:?}");
    assert_eq!(ws.is_quiet(Duration::from_millis(300)).await, Ok(()));
}

db_tests!(
    a_launched_session_is_followed_from_pending_to_terminated,
    the_legacy_protocol_is_served_too,
    every_close_code_of_the_protocol,
    limits_on_operations_and_silent_peers,
    each_viewer_gets_only_what_the_list_would_show,
    a_resumed_subscription_replays_exactly_what_it_missed,
    a_consumer_that_falls_behind_gets_lagged_and_resumes,
);

/// Two replicas on one PostgreSQL (SQLite is one process: one bus). A launch through one
/// reaches a subscriber on the other, with the same cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_postgres_share_events() {
    let Some(a) = TestApp::start(Backend::Postgres).await else { return };
    let mut b = a.replica().await;
    let addr = b.serve().await;
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.subscribe("s", EVENTS, json!({"p": default_project(), "after": b.last_cursor().await})).await;
    // A launch through b itself first: once its event arrives, the feed follows b's bus.
    let warm = launch(&b, "demo-alice", "warm").await;
    assert_eq!(ws.next_event("s").await["sessionId"], json!(warm));
    let heard = b.bus.notifications();
    let id = launch(&a, "demo-alice", "across").await;
    let e = ws.next_event("s").await;
    assert_eq!((e["sessionId"].as_str(), e["toStatus"].as_str()), (Some(id.as_str()), Some("PENDING")));
    assert_eq!(e["cursor"], timeline(&a, &id).await[0]["cursor"]);
    assert!(b.bus.notifications() > heard, "b heard of a's commit through NOTIFY");
    // And the other way round, terminating through b, watched on a.
    let mut a = a;
    let addr_a = a.serve().await;
    let mut wa = Ws::open(addr_a, "demo-alice").await;
    wa.subscribe("s", EVENTS, json!({"p": default_project(), "sid": id, "after": a.last_cursor().await})).await;
    terminate(&b, "demo-alice", std::slice::from_ref(&id)).await;
    assert_eq!(wa.next_event("s").await["toStatus"], "CANCELLED");
}

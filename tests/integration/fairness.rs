//! No user can slow everyone down: each user's share of connections, subscriptions and
//! replays, replays on a budget of their own, one load of an event's relations and one
//! reader of a followed log for every subscriber, aggregates capped per request, WebSocket
//! operations under the in-flight cap, and the refusals of the edges (oversized messages,
//! connections that never authenticate, bad tokens counted by their code).

use std::time::Duration;

use sea_orm::{ActiveModelTrait, Set};
use serde_json::{Value, json};

use sessiond::config::{GraphqlLimits, HttpLimits, ShareLimits, WsLimits};

use crate::db_tests;
use crate::support::ws::{EVENTS, TRANSPORT_WS, Ws, codes};
use crate::support::{TestApp, error_codes, hold_the_in_flight_cap, launch_input, project, session_row};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";

async fn launch(app: &TestApp, token: &str, name: &str) -> String {
    let resp = app.gql(Some(token), LAUNCH, json!({"i": launch_input(name, 0.5)})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

fn shares(shares: ShareLimits) -> HttpLimits {
    HttpLimits { shares, ..HttpLimits::default() }
}

/// The next `next` message of any operation; fails on anything else.
async fn next_of_any(ws: &mut Ws) -> (String, Value) {
    let m = ws.recv().await;
    assert_eq!(m["type"], "next", "{m}");
    (m["id"].as_str().expect("id").to_owned(), m["payload"].clone())
}

const CURSORS: &str =
    "subscription($p: ID!, $after: String) { sessionEvents(projectId: $p, scope: PROJECT, after: $after) { cursor } }";

/// Finding: replaying one's history from the first event, many times over, took the
/// request pool. Now a user runs a few replays at once, and they read on a pool and a
/// budget of their own: the requests' connections see none of their statements.
async fn replays_read_on_a_budget_of_their_own(app: TestApp) {
    let limits = shares(ShareLimits {
        max_replays_per_user: 2,
        replay_connections: 1,
        replay_rows_per_second: 2_000,
        ..ShareLimits::default()
    });
    let mut app = app.reopen_with(limits).await;
    app.generate(1_500, 7).await;
    let addr = app.serve().await;
    let p = project("default/default");
    // Two replays from the first event; the client reads nothing yet, so both go on.
    let mut ws = Ws::open(addr, "demo-admin").await;
    for id in ["r1", "r2"] {
        ws.subscribe(id, CURSORS, json!({"p": p, "after": "0"})).await;
    }
    // Both run once each has sent an event (they then wait for the client to read).
    let mut first = std::collections::BTreeSet::new();
    while first.len() < 2 {
        first.insert(next_of_any(&mut ws).await.0);
    }
    // A third at once is over the user's share, on any connection; another user's is not.
    let mut other = Ws::open(addr, "demo-admin").await;
    other.subscribe("r3", CURSORS, json!({"p": p, "after": "0"})).await;
    let errors = other.error_of("r3").await;
    assert_eq!(codes(&errors), ["LIMIT_EXCEEDED"], "{errors:?}");
    assert!(errors[0]["message"].as_str().is_some_and(|m| m.contains("at most 2")), "{errors:?}");
    let mut bob = Ws::open(addr, "demo-bob").await;
    bob.subscribe("b", EVENTS, json!({"p": p, "after": "0"})).await;
    assert_eq!(bob.recv().await["type"], "next", "bob's own replay starts");

    // Hundreds of replayed events, and not one statement on the requests' pool.
    let (before, _) = app.count_statements(async {}).await;
    let (used, seen) = app
        .count_statements(async {
            let mut seen = std::collections::BTreeMap::<String, Vec<i64>>::new();
            for _ in 0..300 {
                let (id, payload) = next_of_any(&mut ws).await;
                let cursor = payload["data"]["sessionEvents"]["cursor"].as_str().expect("cursor");
                seen.entry(id).or_default().push(cursor.parse().expect("a number"));
            }
            seen
        })
        .await;
    assert_eq!((before, used), (0, 0), "replays never read on the requests' pool");
    for cursors in seen.values() {
        assert!(cursors.windows(2).all(|w| w[0] < w[1]), "in order, none twice: {cursors:?}");
    }
    assert!(app.live.replays.peak_statements() <= 1, "one replay statement at a time, as budgeted");
    assert!(app.live.replays.rows_charged() >= 300);
    // Their share comes back when they end: a new replay starts.
    drop(ws);
    let mut again = None;
    for _ in 0..100 {
        other.subscribe("r4", CURSORS, json!({"p": p, "after": "0"})).await;
        let m = other.recv().await;
        if m["type"] == "next" {
            again = Some(m);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(again.is_some(), "the ended replays gave their share back");
}

/// Findings: connections were capped for all users together, and before authentication,
/// so three silent upgrades locked everyone out; subscriptions had no bound per user.
async fn each_user_has_a_share_of_connections_and_subscriptions(app: TestApp) {
    let limits = HttpLimits {
        // The silent connections are evicted, not timed out, however slow this machine is.
        ws: WsLimits { max_ws_connections: 10, ws_init_timeout_ms: 60_000, ..WsLimits::default() },
        shares: ShareLimits {
            max_ws_connections_per_user: 2,
            max_subscriptions_per_user: 3,
            max_ws_unauthenticated: 2,
            ..ShareLimits::default()
        },
        ..HttpLimits::default()
    };
    let mut app = app.reopen_with(limits).await;
    let addr = app.serve().await;
    let init =
        |token: &str| json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {token}")}});
    // Two connections that never authenticate fill the waiting room; the next arrival makes
    // room by closing the one that waited longest, and authenticates.
    let mut silent = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    let mut silent2 = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    let mut a1 = Ws::open(addr, "demo-alice").await;
    // Which of the two the server counted first is its tasks' order, not the connects'
    // (under load the second may be registered first): one of them goes.
    let (code, reason) = tokio::select! {
        closed = silent.closed() => closed,
        closed = silent2.closed() => closed,
    };
    assert_eq!(code, 1013, "{reason}");
    assert!(reason.contains("waited longest"), "{reason}");
    // Alice may hold two connections; a third is refused once she is known, not bob's.
    let mut a2 = Ws::open(addr, "demo-alice").await;
    let mut a3 = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    a3.send(init("demo-alice")).await;
    let (code, reason) = a3.closed().await;
    assert_eq!(code, 1013, "{reason}");
    assert!(reason.contains("at most 2 open WebSocket connections per user"), "{reason}");
    let mut bob = Ws::open(addr, "demo-bob").await;

    // Three subscriptions over both of her connections; a fourth is refused on either.
    let p = project("default/default");
    let from = app.last_cursor().await;
    for id in ["s1", "s2"] {
        a1.subscribe(id, EVENTS, json!({"p": p, "after": from})).await;
    }
    // Started once the connection has answered what came after them.
    a1.send(json!({"type": "ping"})).await;
    assert_eq!(a1.recv().await["type"], "pong");
    a2.subscribe("s3", EVENTS, json!({"p": p, "after": from})).await;
    a2.subscribe("s4", EVENTS, json!({"p": p, "after": from})).await;
    let errors = a2.error_of("s4").await;
    assert_eq!(codes(&errors), ["LIMIT_EXCEEDED"], "{errors:?}");
    assert!(errors[0]["message"].as_str().is_some_and(|m| m.contains("at most 3 running subscriptions")));
    // Bob's are his own share: his subscription starts (a refusal would come before the pong).
    bob.subscribe("b", EVENTS, json!({"p": p, "after": from})).await;
    bob.send(json!({"type": "ping"})).await;
    assert_eq!(bob.recv().await["type"], "pong");
    // One ended gives its share back.
    a1.send(json!({"type": "complete", "id": "s1"})).await;
    let mut started = false;
    for _ in 0..100 {
        a2.subscribe("s4", EVENTS, json!({"p": p, "after": from})).await;
        a2.send(json!({"type": "ping"})).await;
        let m = a2.recv().await;
        if m["type"] == "pong" {
            started = true;
            break;
        }
        assert_eq!(a2.recv().await["type"], "pong", "after the refusal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started, "a subscription ended, so another may run");
    let id = launch(&app, "demo-alice", "shares-1").await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (op, payload) = next_of_any(&mut a2).await;
        assert_eq!(payload["data"]["sessionEvents"]["sessionId"], json!(id));
        ids.push(op);
    }
    ids.sort();
    assert_eq!(ids, ["s3", "s4"]);
}

/// Finding (D53): past their rate, a user's operations waited on the connection, which
/// was not read meanwhile: a close queued behind them went unnoticed for seconds, and the
/// closed connection held the user's share. Now they are refused at once, counting nothing.
async fn operations_past_the_rate_are_refused_at_once(app: TestApp) {
    let limits = shares(ShareLimits {
        max_ws_connections_per_user: 1,
        operations_per_second_per_user: 2,
        ..ShareLimits::default()
    });
    let mut app = app.reopen_with(limits).await;
    let addr = app.serve().await;
    let mut ws = Ws::open(addr, "demo-alice").await;
    const SENT: usize = 60;
    for i in 0..SENT {
        ws.subscribe(&format!("q{i}"), "{ __typename }", json!({})).await;
    }
    let (mut answered, mut refused) = (0, 0);
    while answered + refused < SENT {
        let m = ws.recv().await;
        match m["type"].as_str() {
            Some("next") => assert!(m["payload"].get("errors").is_none(), "{m}"),
            Some("complete") => answered += 1,
            Some("error") => {
                let errors = m["payload"].as_array().expect("errors");
                assert_eq!(codes(errors), ["LIMIT_EXCEEDED"], "{m}");
                refused += 1;
            }
            _ => panic!("{m}"),
        }
    }
    // Ten at once (twice the rate, and at least a terminal's), then about two a second.
    assert!(answered >= 10, "the burst is answered: {answered}");
    assert!(refused >= 20, "past the rate, refused: {refused} of {SENT}");
    // More at once, and her one connection closed at once: its share comes back, and a
    // new one is let in.
    for i in 0..SENT {
        ws.subscribe(&format!("r{i}"), "{ __typename }", json!({})).await;
    }
    drop(ws);
    let mut reopened = false;
    for _ in 0..100 {
        let mut again = Ws::connect(addr, Some(TRANSPORT_WS)).await;
        again.send(json!({"type": "connection_init", "payload": {"authorization": "Bearer demo-alice"}})).await;
        // Refused (1013) while the closed one still counts.
        if again.next_within(Duration::from_secs(5)).await.is_ok_and(|m| m["type"] == "connection_ack") {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened, "the closed connection gave its share back");
}

/// Finding: each subscriber loaded each event's relations itself. Now an event's owner,
/// project, group and image are read once for every subscriber: twenty-one subscribers
/// cost the statements of one.
async fn an_events_relations_are_read_once_for_every_subscriber(app: TestApp) {
    // Subscriptions that start after the warm-up launch replay it: room for all of them.
    let mut app = app.reopen_with(shares(ShareLimits { max_replays_per_user: 100, ..ShareLimits::default() })).await;
    let addr = app.serve().await;
    let p = project("default/default");
    let q = "subscription($p: ID!, $after: String) { sessionEvents(projectId: $p, after: $after) {
        toStatus session { name owner { email } project { name } resourceGroup { name } image { name } } } }";
    let from = app.last_cursor().await;
    let mut first = Ws::open(addr, "demo-alice").await;
    first.subscribe("one", q, json!({"p": p, "after": from})).await;
    // A first event: the subscription is live from then on.
    launch(&app, "demo-alice", "fan-warm").await;
    first.next_payload("one").await;
    let (one, payload) = app
        .count_statements(async {
            launch(&app, "demo-alice", "fan-1").await;
            first.next_payload("one").await
        })
        .await;
    assert_eq!(payload["data"]["sessionEvents"]["session"]["owner"]["email"], "alice@example.com", "{payload}");

    // Twenty more subscribers on two connections, all live.
    let from = app.last_cursor().await;
    let mut many = [Ws::open(addr, "demo-alice").await, Ws::open(addr, "demo-alice").await];
    for (c, ws) in many.iter_mut().enumerate() {
        for i in 0..10 {
            ws.subscribe(&format!("{c}-{i}"), q, json!({"p": p, "after": from})).await;
        }
    }
    launch(&app, "demo-alice", "fan-warm-2").await;
    first.next_payload("one").await;
    for ws in &mut many {
        for _ in 0..10 {
            next_of_any(ws).await;
        }
    }
    let (twenty_one, got) = app
        .count_statements(async {
            launch(&app, "demo-alice", "fan-2").await;
            let mut got = vec![first.next_payload("one").await];
            for ws in &mut many {
                for _ in 0..10 {
                    got.push(next_of_any(ws).await.1);
                }
            }
            got
        })
        .await;
    for g in &got {
        let s = &g["data"]["sessionEvents"]["session"];
        assert_eq!((s["name"].as_str(), s["project"]["name"].as_str()), (Some("fan-2"), Some("default")), "{g}");
        assert_eq!(
            (s["resourceGroup"]["name"].as_str(), s["image"]["name"].as_str()),
            (Some("default"), Some("python:3.12"))
        );
    }
    assert_eq!(twenty_one, one, "the statements of a launch and its event do not grow with the subscribers");
}

/// Finding: every follower of a log polled the database four times a second. Now one
/// reader serves every follower: idle followers cost no statement on the requests' pool,
/// and one statement a look for all of them.
async fn followed_logs_are_read_once_for_every_follower(app: TestApp) {
    use entity::session_log;
    // Fifty followers at once: more than the default rate lets one user start.
    let mut app =
        app.reopen_with(shares(ShareLimits { operations_per_second_per_user: 50, ..ShareLimits::default() })).await;
    let addr = app.serve().await;
    let row = session_row("alice@example.com", "default/default", "logged", "RUNNING", json!({"cpu": 1}));
    let session = row.insert(&app.db).await.expect("a running session");
    let line = |text: &str| session_log::ActiveModel {
        id: sea_orm::ActiveValue::NotSet,
        session_id: Set(session.id),
        line: Set(text.to_owned()),
        created_at: Set(chrono::Utc::now()),
    };
    line("first").insert(&app.db).await.expect("a line");
    let id = sessiond::graphql::ids::encode(sessiond::graphql::ids::NodeKind::Session, session.id).0;
    let q = "subscription($id: ID!) { sessionLogs(sessionId: $id, tail: 1) }";
    let mut ws = Ws::open(addr, "demo-alice").await;
    for i in 0..50 {
        ws.subscribe(&format!("f{i}"), q, json!({"id": id})).await;
    }
    for _ in 0..50 {
        assert_eq!(next_of_any(&mut ws).await.1["data"]["sessionLogs"], "first");
    }
    // Idle: nothing on the requests' pool, one statement per look of the shared reader.
    let (looks, statements) = app.live.logs.figures();
    let (idle, ()) = app.count_statements(tokio::time::sleep(Duration::from_millis(1200))).await;
    let (looks2, statements2) = app.live.logs.figures();
    assert_eq!(idle, 0, "fifty idle followers cost the requests' pool nothing");
    assert!(looks2 > looks, "the reader looked");
    assert_eq!(statements2 - statements, looks2 - looks, "one statement a look, for every follower");
    assert_eq!(app.live.logs.followed(), 1, "one log followed, whatever the followers");
    // New lines reach every follower once, in order.
    for text in ["second", "third", "fourth"] {
        line(text).insert(&app.db).await.expect("a line");
    }
    let mut by_follower = std::collections::BTreeMap::<String, Vec<String>>::new();
    for _ in 0..150 {
        let (id, payload) = next_of_any(&mut ws).await;
        by_follower.entry(id).or_default().push(payload["data"]["sessionLogs"].as_str().expect("a line").to_owned());
    }
    assert_eq!(by_follower.len(), 50);
    assert!(by_follower.values().all(|l| l == &["second", "third", "fourth"]), "{by_follower:?}");
    // The session ends: every follower's feed completes.
    entity::session::ActiveModel {
        id: sea_orm::ActiveValue::Unchanged(session.id),
        status: Set("TERMINATED".to_owned()),
        terminated_at: Set(Some(chrono::Utc::now())),
        ..Default::default()
    }
    .update(&app.db)
    .await
    .expect("end the session");
    let mut completed = 0;
    while completed < 50 {
        let m = ws.recv().await;
        assert_eq!(m["type"], "complete", "{m}");
        completed += 1;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(app.live.logs.followed(), 0, "nothing is followed any more");
}

/// Finding: nineteen counts in one small request took seconds of the pool. Now a request
/// runs its aggregates one after the other, at most `--max-aggregates`, and none once they
/// scanned `--max-aggregate-rows`.
async fn aggregates_are_capped_per_request(app: TestApp) {
    app.generate(60, 3).await;
    let counts =
        (0..19).map(|i| format!("c{i}: sessionCounts(projectId: $p, scope: PROJECT) {{ all }}")).collect::<String>();
    let q = format!("query($p: ID!) {{ {counts} }}");
    let p = project("default/default");
    // Eight ran; each of the others is refused. A count is never null, so neither is the
    // answer's `data` once one is refused: there is none.
    let resp = app.gql(Some("demo-admin"), &q, json!({"p": p})).await;
    assert_eq!(resp["data"], Value::Null, "{resp}");
    let refused = error_codes(&resp);
    assert_eq!(refused, vec!["LIMIT_EXCEEDED"; 11], "{resp}");
    // Priced by what they scan: past the rows a request's counts may scan, no more.
    let limits = HttpLimits {
        graphql: GraphqlLimits { max_aggregate_rows: 10, ..GraphqlLimits::default() },
        ..HttpLimits::default()
    };
    let app = app.reopen_with(limits).await;
    let resp = app.gql(Some("demo-admin"), &q, json!({"p": p})).await;
    assert_eq!(error_codes(&resp), vec!["LIMIT_EXCEEDED"; 18], "the first alone ran: {resp}");
    assert!(resp["errors"][0]["message"].as_str().is_some_and(|m| m.contains("scanned")), "{resp}");
    let one = "query($p: ID!) { sessionCounts(projectId: $p, scope: PROJECT) { all } }";
    let resp = app.gql(Some("demo-admin"), one, json!({"p": p})).await;
    let all = resp["data"]["sessionCounts"]["all"].as_i64();
    assert!(all.is_some_and(|n| n > 10), "one count may scan past the budget: {resp}");
    // The page's own counts fit.
    let page =
        "query($p: ID!) { sessions(projectId: $p, first: 5) { totalCount } sessionCounts(projectId: $p) { all } }";
    let app = app.reopen_with(HttpLimits::default()).await;
    let resp = app.gql(Some("demo-alice"), page, json!({"p": p})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
}

/// Findings: WebSocket operations escaped `--max-in-flight`; an oversized message reset the
/// connection; a bad token sent by a JSON client was counted as OK.
async fn the_edges_refuse_with_their_codes(app: TestApp) {
    let limits = HttpLimits {
        max_in_flight: 1,
        ws: WsLimits { ws_max_message_bytes: 1024, ..WsLimits::default() },
        ..HttpLimits::default()
    };
    let mut app = app.reopen_with(limits).await;
    let addr = app.serve().await;
    let app = std::sync::Arc::new(app);
    // 1009 for a message over the limit, with a reason.
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.send_text(&json!({"type": "ping", "padding": "x".repeat(2000)}).to_string()).await;
    let (code, reason) = ws.closed().await;
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("1024"), "{reason}");

    // A query over the WebSocket while the one request allowed in flight waits (for a
    // database connection: the test holds them all).
    let mut ws = Ws::open(addr, "demo-alice").await;
    let (_, held, waiting) = hold_the_in_flight_cap(&app).await;
    ws.subscribe("q", "{ viewer { user { email } } }", json!({})).await;
    let refused = ws.recv().await;
    assert_eq!(refused["type"], "error", "{refused}");
    let errors = refused["payload"].as_array().expect("errors");
    assert_eq!(codes(errors), ["UNAVAILABLE"], "{refused}");
    assert!(errors[0]["message"].as_str().is_some_and(|m| m.contains("at once")), "{refused}");
    drop(held);
    waiting.await.expect("the waiting request");

    // A JSON client's bad token: 200 with UNAUTHENTICATED, counted as UNAUTHENTICATED.
    let (status, body) = app.gql_full(Some("not-a-token"), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!((status.as_u16(), error_codes(&body)), (200, vec!["UNAUTHENTICATED".to_owned()]));
    let (_, _, metrics) = app.get("/metrics").await;
    let metrics = String::from_utf8(metrics).expect("utf8");
    assert!(
        metrics.contains(r#"sessiond_requests_total{operation="unknown",outcome="UNAUTHENTICATED"} 1"#),
        "{metrics}"
    );
}

/// Finding: session logs were kept for ever. Finished sessions' logs go after
/// `--log-retention-days`, and past a user's budget the oldest go first; a live session's
/// log is never touched.
async fn finished_logs_are_retired(app: TestApp) {
    use entity::session_log;
    use sessiond::domain::live::logs::{Retention, retire};
    let now = chrono::Utc::now();
    let mut ids = Vec::new();
    for (name, status, ended_days_ago) in
        [("old-one", "TERMINATED", Some(40)), ("recent", "TERMINATED", Some(2)), ("live", "RUNNING", None)]
    {
        let mut row = session_row("alice@example.com", "default/default", name, status, json!({"cpu": 1}));
        let ended = ended_days_ago.map(|d| now - chrono::TimeDelta::days(d));
        row.terminated_at = Set(ended);
        row.status_changed_at = Set(ended.unwrap_or(now));
        let s = row.insert(&app.db).await.expect("a session");
        for i in 0..10 {
            session_log::ActiveModel {
                id: sea_orm::ActiveValue::NotSet,
                session_id: Set(s.id),
                line: Set(format!("{name} {i}")),
                created_at: Set(now),
            }
            .insert(&app.db)
            .await
            .expect("a line");
        }
        ids.push(s.id);
    }
    let lines = |id: uuid::Uuid| {
        let db = app.db.clone();
        async move {
            use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
            session_log::Entity::find().filter(session_log::Column::SessionId.eq(id)).count(&db).await.expect("count")
        }
    };
    let deleted = retire(&app.db, Retention { days: Some(30), lines_per_user: None }, now).await.expect("retire");
    assert_eq!(deleted, 10);
    assert_eq!((lines(ids[0]).await, lines(ids[1]).await, lines(ids[2]).await), (0, 10, 10));
    // A budget of 4 lines of finished sessions per user: the oldest 6 of "recent" go.
    let deleted = retire(&app.db, Retention { days: None, lines_per_user: Some(4) }, now).await.expect("retire");
    assert_eq!(deleted, 6);
    assert_eq!((lines(ids[1]).await, lines(ids[2]).await), (4, 10), "the live log is untouched");
    let kept: Vec<String> = {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
        session_log::Entity::find()
            .filter(session_log::Column::SessionId.eq(ids[1]))
            .order_by_asc(session_log::Column::Id)
            .all(&app.db)
            .await
            .expect("lines")
            .into_iter()
            .map(|l| l.line)
            .collect()
    };
    assert_eq!(kept, ["recent 6", "recent 7", "recent 8", "recent 9"], "the newest stay");
}

db_tests!(
    replays_read_on_a_budget_of_their_own,
    each_user_has_a_share_of_connections_and_subscriptions,
    operations_past_the_rate_are_refused_at_once,
    an_events_relations_are_read_once_for_every_subscriber,
    followed_logs_are_read_once_for_every_follower,
    aggregates_are_capped_per_request,
    the_edges_refuse_with_their_codes,
    finished_logs_are_retired,
);

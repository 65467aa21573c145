//! Live events under load: 1 000 WebSocket subscribers to `sessionEvents` on a release
//! server (its own process, on loopback) while a loop launches and terminates sessions.
//! Reports the latency from a transition to its delivery at every subscriber (p50, p99,
//! max) and the server's resident memory per idle subscription. `cargo bench --bench
//! subscriptions [-- --runs N]`; each figure is the median of the runs.
//!
//! Latency is measured from the transition's `occurredAt`, which the writer takes inside
//! its transaction before it commits: an upper bound of commit-to-delivery. Client and
//! server share the machine's cores, so the figure includes the client's own scheduling.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, over_runs, runs, stamp};

/// The loads measured: one subscriber (the pipeline alone), then the target's thousand.
const LOADS: [usize; 2] = [1, 1_000];
const ROUNDS: usize = 30;
const EVENTS: &str = "subscription($p: ID!, $after: String) {
  sessionEvents(projectId: $p, after: $after) { cursor sessionId toStatus occurredAt session { name status } }
}";

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A connection past `connection_ack`.
async fn connection(base: &str) -> Socket {
    let mut request = format!("ws://{base}/graphql/ws").into_client_request().expect("request");
    request.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static("graphql-transport-ws"));
    // A small read buffer: the default (128 KiB) is cleared on every read, which made this
    // client, not the server, the bottleneck.
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4 << 10);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), true).await.expect("connect");
    let init = json!({"type": "connection_init", "payload": {"authorization": "Bearer demo-alice"}});
    ws.send(Message::Text(init.to_string().into())).await.expect("init");
    while let Some(Ok(msg)) = ws.next().await {
        if let Message::Text(t) = msg
            && t.as_str().contains("connection_ack")
        {
            return ws;
        }
    }
    panic!("no connection_ack");
}

/// One subscriber: subscribes after `after` on `ws`, and reports each event.
async fn subscriber(mut ws: Socket, after: String, tx: tokio::sync::mpsc::UnboundedSender<(String, String, f64)>) {
    let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let sub =
        json!({"type": "subscribe", "id": "s", "payload": {"query": EVENTS, "variables": {"p": p, "after": after}}});
    ws.send(Message::Text(sub.to_string().into())).await.expect("subscribe");
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(text) = msg else { continue };
        let now = chrono::Utc::now();
        let Ok(m) = serde_json::from_str::<Next>(text.as_str()) else { continue };
        let Some(e) = m.payload.map(|p| p.data.session_events) else { continue };
        let at: chrono::DateTime<chrono::Utc> = e.occurred_at.parse().expect("occurredAt");
        let ms = (now - at).num_microseconds().unwrap_or(0) as f64 / 1000.0;
        if tx.send((e.session_id.to_owned(), e.to_status.to_owned(), ms)).is_err() {
            return;
        }
    }
}

/// The part of a `next` message the client reads (borrowed: the client stays light).
#[derive(serde::Deserialize)]
struct Next<'a> {
    #[serde(borrow)]
    payload: Option<NextPayload<'a>>,
}

#[derive(serde::Deserialize)]
struct NextPayload<'a> {
    #[serde(borrow)]
    data: NextData<'a>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct NextData<'a> {
    #[serde(borrow)]
    session_events: Event<'a>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event<'a> {
    session_id: &'a str,
    to_status: &'a str,
    occurred_at: &'a str,
}

struct Figures {
    p50: f64,
    p99: f64,
    max: f64,
    delivered: usize,
    kib_per_connection: f64,
    kib_per_subscription: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn run(backend: &str, subscribers: usize) -> Figures {
    let server = Server::start(backend, &[]).await;
    let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let terminate = "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }";
    let input = |name: &str| {
        json!({"projectId": p, "name": name, "image": "python:3.12",
               "resources": [{"slot": "cpu", "amount": 0.5}, {"slot": "mem", "amount": 1_i64 << 30}]})
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // Warm up the server's paths with one subscriber and one session, then measure.
    let after = "0".to_owned();
    let warm = tokio::spawn(subscriber(connection(&server.base).await, after.clone(), tx.clone()));
    let resp = server.gql(launch, json!({"i": input("warm-up")})).await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().expect("id").to_owned();
    while rx.recv().await.expect("event").0 != id {}
    server.gql(terminate, json!({"ids": [id]})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    warm.abort();
    tokio::time::sleep(Duration::from_millis(300)).await;
    while rx.try_recv().is_ok() {}
    // Open every pooled database connection now, so that the pool's growth is not counted
    // as the subscriptions' memory.
    let warm: Vec<_> = (0..32).map(|_| server.gql("{ viewer { projects { name } } }", json!({}))).collect();
    futures_util::future::join_all(warm).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = server.rss_kib();

    let cursor = {
        let r = server
            .gql("query($id: ID!) { session(id: $id) { statusTransitions { cursor } } }", json!({"id": id}))
            .await;
        r["data"]["session"]["statusTransitions"].as_array().and_then(|a| a.last()).expect("t")["cursor"]
            .as_str()
            .expect("cursor")
            .to_owned()
    };
    let mut sockets = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        sockets.push(connection(&server.base).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let connected = server.rss_kib();
    let kib_per_connection = (connected.saturating_sub(before)) as f64 / subscribers as f64;
    let tasks: Vec<_> =
        sockets.into_iter().map(|ws| tokio::spawn(subscriber(ws, cursor.clone(), tx.clone()))).collect();
    // A fence: once every subscriber has its event, all are live.
    let fence = server.gql(launch, json!({"i": input("fence")})).await;
    let fence = fence["data"]["launchSession"]["session"]["id"].as_str().expect("id").to_owned();
    let mut got = 0;
    while got < subscribers {
        let (sid, status, _) = rx.recv().await.expect("event");
        got += usize::from(sid == fence && status == "PENDING");
    }
    server.gql(terminate, json!({"ids": [fence]})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    while rx.try_recv().is_ok() {}
    let during = server.rss_kib();
    let kib_per_subscription = (during.saturating_sub(before)) as f64 / subscribers as f64;
    let _ = connected;

    let mut latencies = Vec::new();
    for round in 0..ROUNDS {
        let resp = server.gql(launch, json!({"i": input(&format!("round-{round}"))})).await;
        let id = resp["data"]["launchSession"]["session"]["id"].as_str().expect("id").to_owned();
        let mut terminated = false;
        let mut ended = 0;
        while ended < subscribers {
            let (sid, status, ms) = rx.recv().await.expect("event");
            if sid != id {
                continue;
            }
            latencies.push(ms);
            if !terminated {
                terminated = true;
                server.gql(terminate, json!({"ids": [id]})).await;
            }
            ended += usize::from(["TERMINATED", "CANCELLED", "ERROR"].contains(&status.as_str()));
        }
    }
    for t in tasks {
        t.abort();
    }
    latencies.sort_by(f64::total_cmp);
    Figures {
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        max: *latencies.last().expect("events"),
        delivered: latencies.len(),
        kib_per_connection,
        kib_per_subscription,
    }
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench subscriptions");
    println!(
        "| database | subscribers | deliveries (per run) | p50 (ms) | p99 (ms) | max (ms) | server memory per subscription, connection included (KiB) | of which the connection alone (KiB) | runs p99 (ms) | runs memory (KiB) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (backend, subscribers) in ["sqlite", "postgres"].into_iter().flat_map(|b| LOADS.map(|n| (b, n))) {
        let mut all = Vec::new();
        for _ in 0..runs() {
            all.push(run(backend, subscribers).await);
        }
        let (p50, _) = over_runs(&all.iter().map(|f| f.p50).collect::<Vec<_>>(), 1);
        let (p99, p99_runs) = over_runs(&all.iter().map(|f| f.p99).collect::<Vec<_>>(), 1);
        let (max, _) = over_runs(&all.iter().map(|f| f.max).collect::<Vec<_>>(), 1);
        let (mem, mem_runs) = over_runs(&all.iter().map(|f| f.kib_per_subscription).collect::<Vec<_>>(), 1);
        let (conn, _) = over_runs(&all.iter().map(|f| f.kib_per_connection).collect::<Vec<_>>(), 1);
        let delivered = all[0].delivered;
        if subscribers == 1 {
            // Memory per subscription means nothing for one: the noise of the process is larger.
            println!("| {backend} | 1 | {delivered} | {p50:.1} | {p99:.1} | {max:.1} | — | — | {p99_runs} | — |");
        } else {
            println!(
                "| {backend} | {subscribers} | {delivered} | {p50:.1} | {p99:.1} | {max:.1} | {mem:.1} | {conn:.1} | {p99_runs} | {mem_runs} |"
            );
        }
    }
}

//! The Sessions page's live feed side by side with PostGraphile's: the page's own
//! `PageEvents` subscription (read from web/src/page.ts, as the page sends it, as the
//! project's administrator) against PostGraphile 4.14's simple subscriptions
//! (`@graphile/pg-pubsub`, `listen(topic:)`) with the same fields through `relatedNode`.
//!
//! One PostgreSQL database, demo data and a few thousand generated sessions, every one
//! ended (by SQL: no event) so that nothing moves but what the writer does. A writer, a
//! sessiond replica of its own that is not measured, renames sessions through its API at a
//! fixed rate: each rename commits a MODIFIED event, which reaches every replica through
//! PostgreSQL's NOTIFY. A trigger on the events' table also sends each one to PostGraphile's
//! topic of the session's project (installed for both runs: the writer's cost is the same).
//! The contender, sessiond (another replica) or PostGraphile, serves `--subscribers`
//! WebSocket subscribers (graphql-transport-ws for both). Figures: the contender's CPU per
//! 1 000 deliveries (its process tree, and with every `postgres` process), deliveries
//! missing, and the latency from the writer's answer to each delivery.
//!
//! What is not alike, said where the figures are: PostGraphile's subscriber picks its topic
//! (no visibility: anyone may listen to any project), has no resume (`after`) and reads the
//! event's fields with a statement per subscriber per event (`relatedNode`); sessiond checks
//! each subscriber's right to each event and reads each event once for all of them.
//!
//! `cargo bench --bench page_events [-- --runs N] [--subscribers N] [--rate R] [--seconds S]`
//! (defaults: 3 runs, 100 subscribers, 20 renames a second for 10 s).

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{cpu_seconds, over_runs, runs, stamp, tree};

/// PostGraphile's form of the page's `PageEvents`: the event's kind, session and status,
/// and the session's name and status info, through the node the trigger names.
const POSTGRAPHILE_EVENTS: &str = "subscription($topic: String!) { listen(topic: $topic) {
  relatedNodeId relatedNode { ... on SessionStatusTransition { id kind sessionId toStatus
    sessionBySessionId { name statusInfo } } } } }";

/// Sends each new event to PostGraphile's topic of its session's project (`page:<uuid>`: a
/// channel name has at most 63 bytes).
const TRIGGER: &str = "
CREATE OR REPLACE FUNCTION page_events_notify() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('postgraphile:page:' || s.project_id,
    json_build_object('__node__', json_build_array('session_status_transitions', NEW.id))::text)
  FROM sessions s WHERE s.id = NEW.session_id;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS page_events_notify ON session_status_transitions;
CREATE TRIGGER page_events_notify AFTER INSERT ON session_status_transitions
  FOR EACH ROW EXECUTE FUNCTION page_events_notify();";

const TOKEN: &str = "demo-admin";

fn flag(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port()
}

/// The page's `EVENTS` constant, as web/src/page.ts sends it.
fn page_events() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("web/src/page.ts");
    let text = std::fs::read_to_string(path).expect("page.ts");
    let from = text.find("const EVENTS = `").expect("the page's events") + "const EVENTS = `".len();
    let to = text[from..].find('`').expect("its end") + from;
    text[from..to].to_owned()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Sessiond,
    PostGraphile,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sessiond => "sessiond",
            Kind::PostGraphile => "postgraphile",
        }
    }
}

/// A process stopped (with its children) when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        for pid in tree(self.0.id()).into_iter().rev() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        let _ = self.0.wait();
    }
}

fn sessiond(url: &str, port: u16) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["serve", "--database-url", url, "--bind", &format!("127.0.0.1:{port}"), "--runtime", "simulated"])
        // One user's many subscribers: the fairness shares set aside.
        .args(["--max-ws-connections", "5000", "--max-ws-connections-per-user", "5000"])
        .args(["--max-subscriptions-per-user", "5000", "--operations-per-second-per-user", "100000"])
        .env("SESSIOND_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sessiond");
    Process(child)
}

fn postgraphile(url: &str, port: u16) -> Process {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/postgraphile");
    if !dir.join("node_modules/@graphile/pg-pubsub").exists() {
        let status =
            Command::new("npm").args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"]).current_dir(&dir).status();
        assert!(status.is_ok_and(|s| s.success()), "npm ci in {}", dir.display());
    }
    let child = Command::new("node")
        .arg(dir.join("node_modules/.bin/postgraphile"))
        // The server plugin first: it adds the options after it.
        .args(["--plugins", "@graphile/pg-pubsub", "--subscriptions", "--simple-subscriptions"])
        .args(["--connection", url, "--schema", "public", "--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--disable-query-log")
        .env("NODE_ENV", "production")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start PostGraphile");
    Process(child)
}

async fn until_ready(port: u16, path: &str) {
    let http = reqwest::Client::new();
    for _ in 0..1200 {
        if http.get(format!("http://127.0.0.1:{port}{path}")).send().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("127.0.0.1:{port} did not answer");
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One subscriber of `kind` on `port`, past its subscription; each event's session id (by
/// its name, which the writer sets) goes to `tx` with its arrival instant.
async fn subscribe(kind: Kind, port: u16) -> Socket {
    let path = if kind == Kind::Sessiond { "/graphql/ws" } else { "/graphql" };
    let mut request = format!("ws://127.0.0.1:{port}{path}").into_client_request().expect("request");
    request.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static("graphql-transport-ws"));
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4 << 10);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), true).await.expect("connect");
    let init = json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {TOKEN}")}});
    ws.send(Message::Text(init.to_string().into())).await.expect("init");
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.as_str().contains("connection_ack") => break,
            Some(Ok(_)) => {}
            other => panic!("no connection_ack: {other:?}"),
        }
    }
    let project = demo_project_id("default/default");
    let payload = match kind {
        Kind::Sessiond => json!({"query": page_events(), "variables": {
            "p": encode(NodeKind::Project, project).0, "scope": "PROJECT", "after": null}}),
        Kind::PostGraphile => {
            json!({"query": POSTGRAPHILE_EVENTS, "variables": {"topic": format!("page:{project}")}})
        }
    };
    let sub = json!({"type": "subscribe", "id": "1", "payload": payload});
    ws.send(Message::Text(sub.to_string().into())).await.expect("subscribe");
    ws
}

/// The renamed session's new name in a `next` message, whatever the contender's shape.
fn renamed(kind: Kind, text: &str) -> Option<String> {
    let m: Value = serde_json::from_str(text).ok()?;
    if m["type"] != "next" {
        return None;
    }
    let data = &m["payload"]["data"];
    let name = match kind {
        Kind::Sessiond => &data["sessionEvents"]["session"]["name"],
        Kind::PostGraphile => &data["listen"]["relatedNode"]["sessionBySessionId"]["name"],
    };
    name.as_str().map(str::to_owned)
}

/// Reads `ws` (subscriber `who`) until closed, sending each event's session name and
/// arrival to `tx`.
async fn listen(
    kind: Kind,
    who: usize,
    mut ws: Socket,
    tx: tokio::sync::mpsc::UnboundedSender<(usize, String, Instant)>,
) {
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(t) = msg else { continue };
        if let Some(name) = renamed(kind, t.as_str())
            && tx.send((who, name, Instant::now())).is_err()
        {
            return;
        }
    }
}

/// The writer: renames sessions through its API.
struct Writer {
    port: u16,
    http: reqwest::Client,
    ids: Vec<String>,
}

impl Writer {
    async fn rename(&self, i: usize, name: &str) {
        let resp: Value = self
            .http
            .post(format!("http://127.0.0.1:{}/graphql", self.port))
            .bearer_auth(TOKEN)
            .json(&json!({
                "query": "mutation($ids: [ID!]!, $n: String) { modifySessions(ids: $ids, input: {name: $n}) { results { outcome } } }",
                "variables": {"ids": [self.ids[i % self.ids.len()]], "n": name},
            }))
            .send()
            .await
            .expect("rename")
            .json()
            .await
            .expect("JSON");
        assert_eq!(resp["data"]["modifySessions"]["results"][0]["outcome"], "MODIFIED", "{resp}");
    }
}

/// One run's figures.
struct Run {
    cpu: f64,
    cpu_with_db: f64,
    missing: usize,
    p50_ms: f64,
    p99_ms: f64,
}

async fn run(kind: Kind, url: &str, writer: &Writer, subscribers: usize, rate: f64, seconds: u64, round: usize) -> Run {
    let port = free_port();
    let _contender = match kind {
        Kind::Sessiond => sessiond(url, port),
        Kind::PostGraphile => postgraphile(url, port),
    };
    until_ready(port, "/graphql").await;
    let root = _contender.0.id();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::with_capacity(subscribers);
    for who in 0..subscribers {
        let ws = subscribe(kind, port).await;
        tasks.push(tokio::spawn(listen(kind, who, ws, tx.clone())));
    }
    // Fences, one every half second, until every subscriber has heard one: all are live.
    let mut heard = std::collections::HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    for fence in 0.. {
        assert!(Instant::now() < deadline, "{}: {} of {subscribers} subscribers live", kind.name(), heard.len());
        writer.rename(0, &format!("fence-{round}-{}-{fence}", kind.name())).await;
        let until = Instant::now() + Duration::from_millis(500);
        while let Ok(Some((who, name, _))) = tokio::time::timeout_at(until.into(), rx.recv()).await {
            if name.starts_with("fence-") {
                heard.insert(who);
            }
        }
        if heard.len() == subscribers {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    while rx.try_recv().is_ok() {}

    let before = cpu_seconds(root);
    let count = (rate * seconds as f64) as usize;
    let mut sent: Vec<(String, Instant)> = Vec::with_capacity(count);
    let start = Instant::now();
    for i in 0..count {
        tokio::time::sleep_until((start + Duration::from_secs_f64(i as f64 / rate)).into()).await;
        let name = format!("ev-{round}-{}-{i}", kind.name());
        writer.rename(i + 1, &name).await;
        sent.push((name, Instant::now()));
    }
    // Everything sent arrives, or is counted missing after a grace period.
    let expected = count * subscribers;
    let mut latencies = Vec::with_capacity(expected);
    let grace = Instant::now() + Duration::from_secs(10);
    let at: std::collections::HashMap<&str, Instant> = sent.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    while latencies.len() < expected {
        let left = grace.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some((_, name, arrived))) => {
                if let Some(sent) = at.get(name.as_str()) {
                    latencies.push(arrived.saturating_duration_since(*sent).as_secs_f64() * 1e3);
                }
            }
            _ => break,
        }
    }
    let after = cpu_seconds(root);
    for t in tasks {
        t.abort();
    }
    let delivered = latencies.len().max(1) as f64;
    latencies.sort_by(f64::total_cmp);
    let pick = |p: f64| latencies.get(((latencies.len().max(1) - 1) as f64 * p) as usize).copied().unwrap_or(f64::NAN);
    Run {
        cpu: (after.0 - before.0) / delivered * 1e3,
        cpu_with_db: (after.0 - before.0 + after.1 - before.1) / delivered * 1e3,
        missing: expected - latencies.len(),
        p50_ms: pick(0.5),
        p99_ms: pick(0.99),
    }
}

#[tokio::main]
async fn main() {
    let subscribers: usize = flag("--subscribers").and_then(|s| s.parse().ok()).unwrap_or(100);
    let rate: f64 = flag("--rate").and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let seconds: u64 = flag("--seconds").and_then(|s| s.parse().ok()).unwrap_or(10);
    stamp("cargo bench --bench page_events");
    let (url, _) = support::database("postgres").await;
    let status = Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["generate", "--sessions", "2000", "--database-url", &url])
        .env("SESSIOND_LOG", "error")
        .stdout(Stdio::null())
        .status()
        .expect("generate");
    assert!(status.success(), "sessiond generate");
    let db = Database::connect(&url).await.expect("connect");
    // Nothing moves but what the writer does: every session ended, without an event.
    db.execute_unprepared(
        "UPDATE sessions SET status = 'TERMINATED', terminated_at = coalesce(terminated_at, now()),
           occupied_slots = '{}'::jsonb WHERE status NOT IN ('TERMINATED', 'CANCELLED', 'ERROR')",
    )
    .await
    .expect("end every session");
    db.execute_unprepared(TRIGGER).await.expect("the trigger");
    db.execute_unprepared("VACUUM ANALYZE").await.expect("vacuum");
    let project = demo_project_id("default/default");
    let ids: Vec<String> = {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect};
        let rows: Vec<uuid::Uuid> = entity::session::Entity::find()
            .select_only()
            .column(entity::session::Column::Id)
            .filter(entity::session::Column::ProjectId.eq(project))
            .limit(200)
            .into_tuple()
            .all(&db)
            .await
            .expect("sessions");
        rows.into_iter().map(|id| encode(NodeKind::Session, id).0).collect()
    };
    let writer_port = free_port();
    let _writer = sessiond(&url, writer_port);
    until_ready(writer_port, "/readyz").await;
    let writer = Writer { port: writer_port, http: reqwest::Client::new(), ids };

    let mut figures: Vec<(Kind, Vec<Run>)> = vec![(Kind::Sessiond, Vec::new()), (Kind::PostGraphile, Vec::new())];
    for round in 0..runs() {
        for (kind, runs) in &mut figures {
            let r = run(*kind, &url, &writer, subscribers, rate, seconds, round).await;
            eprintln!(
                "round {} {}: {:.2} s / 1 000 deliveries ({:.2} with the database), {} missing",
                round + 1,
                kind.name(),
                r.cpu,
                r.cpu_with_db,
                r.missing
            );
            runs.push(r);
        }
    }
    println!(
        "{subscribers} subscribers of the page's `PageEvents` (sessiond) or of `listen` (PostGraphile), {rate} renames a second for {seconds} s ({} deliveries a run)",
        (rate * seconds as f64) as usize * subscribers
    );
    println!();
    println!(
        "| contender | CPU s / 1 000 deliveries | + database | missing | p50 ms | p99 ms | runs (CPU + database) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let med = |xs: Vec<f64>| over_runs(&xs, 2);
    for (kind, runs) in &figures {
        let (with_db, runs_db) = med(runs.iter().map(|r| r.cpu_with_db).collect());
        println!(
            "| {} | {:.3} | {with_db:.3} | {} | {:.1} | {:.1} | {runs_db} |",
            kind.name(),
            med(runs.iter().map(|r| r.cpu).collect()).0,
            runs.iter().map(|r| r.missing).sum::<usize>(),
            med(runs.iter().map(|r| r.p50_ms).collect()).0,
            med(runs.iter().map(|r| r.p99_ms).collect()).0,
        );
    }
    let ratio = |of: &dyn Fn(&Run) -> f64| -> f64 {
        let (ours, theirs) = (&figures[0].1, &figures[1].1);
        med(ours.iter().zip(theirs).map(|(a, b)| of(a) / of(b)).collect()).0
    };
    println!();
    let v = ratio(&|r| r.cpu_with_db);
    println!(
        "- sessiond CPU per delivery ÷ PostGraphile's, database included: **{v:.2}** (target ≤ 0.5: {})",
        if v <= 0.5 { "met" } else { "missed" }
    );
    println!("- sessiond CPU per delivery ÷ PostGraphile's, the server alone: **{:.2}**", ratio(&|r| r.cpu));
}

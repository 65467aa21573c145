//! A whole page load under many users: N simulated users each open the Sessions page (the
//! documents the page sends at once: the list with its counts, the three resource panels,
//! the viewer's settings, and a `sessionEvents` subscription that stays open), then every
//! few seconds act (launch a session, terminate one of theirs, or page through the list),
//! on a release server (its own process, loopback) over 100 000 sessions.
//!
//! Reports, for the page's requests: p50, p99 and the largest latency, the errors (any
//! answer but 200 without GraphQL errors, or a dropped subscription), and the server's
//! resident memory per connected user (with every user connected, less before any). The
//! machine's load average is printed beside them: client and server share its cores.
//!
//! `cargo bench --bench page_load [-- --users N --seconds S --backend sqlite|postgres]`
//! (defaults: 1 000 users, 60 s after every user has opened the page, PostgreSQL).

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, percentile, stamp};

const LIST: &str = "query($p: ID!, $scope: SessionScope, $after: String) {
  sessions(projectId: $p, scope: $scope, first: 20, after: $after, filter: { tab: RUNNING }) {
    edges { cursor node { id name status statusInfo type createdAt startedAt queuePosition
      owner { email } image { name } resourceGroup { name } requestedSlots { cpu memory } } }
    pageInfo { hasNextPage endCursor } }
  sessionCounts(projectId: $p, scope: $scope) { all running finished byType { type count } } }";
const PANELS: &str = "query($p: ID!) {
  mine: resourcePanel(projectId: $p, view: MY_IN_RESOURCE_GROUP) { resourceGroup slots { slot used limit remaining bindingLayer } }
  total: resourcePanel(projectId: $p, view: MY_TOTAL) { slots { slot used limit remaining bindingLayer } }
  group: resourcePanel(projectId: $p, view: TOTAL_IN_RESOURCE_GROUP) { slots { slot used limit remaining } } }";
const SETTINGS: &str = "{ viewer { user { email role } projects { id name }
  settings { resourcePanelView sessionListColumns { column visible } } } }";
const EVENTS: &str = "subscription($p: ID!) { sessionEvents(projectId: $p) { cursor sessionId toStatus } }";
const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const TERMINATE: &str = "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }";

struct Args {
    users: usize,
    seconds: u64,
    backend: String,
}

fn args() -> Args {
    let argv: Vec<String> = std::env::args().collect();
    let value = |name: &str| argv.iter().position(|a| a == name).and_then(|i| argv.get(i + 1)).cloned();
    Args {
        users: value("--users").and_then(|v| v.parse().ok()).unwrap_or(1000),
        seconds: value("--seconds").and_then(|v| v.parse().ok()).unwrap_or(60),
        backend: value("--backend").unwrap_or_else(|| "postgres".to_owned()),
    }
}

/// demo.toml and `n` users of project `default`: every 50th an ADMIN whose page shows
/// the whole project (all 100 000 sessions), the rest plain users with pages of their own.
fn users_declaration(n: usize) -> String {
    let mut text = sessiond::domain::directory::apply::DEMO.to_owned();
    for i in 0..n {
        let role = if i % 50 == 0 { "\nrole = \"ADMIN\"" } else { "" };
        text.push_str(&format!(
            "\n[users.\"user{i:04}@load.example\"]\ndomain = \"default\"{role}\nprojects = [\"default\"]\n\
             keypairs = [{{ access_key = \"AKLOAD{i:04}\", policy = \"default\", secret = \"load-user-{i:04}\" }}]\n"
        ));
    }
    text
}

#[derive(Default)]
struct Tally {
    /// (document, milliseconds) of every page request.
    page: std::sync::Mutex<Vec<(&'static str, f64)>>,
    /// Milliseconds of every action (launch, terminate).
    actions: std::sync::Mutex<Vec<f64>>,
    errors: AtomicUsize,
    /// Launches the quotas refused: the user's limits at work, not errors.
    refused: AtomicUsize,
    events: AtomicUsize,
    opened: AtomicUsize,
}

struct User {
    i: usize,
    token: String,
    admin: bool,
    http: reqwest::Client,
    base: String,
    project: String,
}

impl User {
    async fn post(&self, query: &str, variables: Value) -> Option<(Value, f64)> {
        let t = Instant::now();
        let sent = self
            .http
            .post(format!("http://{}/graphql", self.base))
            .bearer_auth(&self.token)
            .json(&json!({"query": query, "variables": variables}))
            .send()
            .await;
        let answer = match sent {
            Ok(r) if r.status().is_success() => r.json::<Value>().await.ok(),
            _ => None,
        };
        Some((answer?, t.elapsed().as_secs_f64() * 1e3))
    }

    /// One page document, timed and tallied.
    async fn page(&self, tally: &Tally, name: &'static str, query: &str, variables: Value) -> Option<Value> {
        match self.post(query, variables).await {
            Some((v, ms)) if v.get("errors").is_none() => {
                tally.page.lock().expect("tally").push((name, ms));
                Some(v)
            }
            _ => {
                tally.errors.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn scope(&self) -> &'static str {
        if self.admin { "PROJECT" } else { "MINE" }
    }

    /// What opening the page sends at once.
    async fn open(&self, tally: &Tally) -> Option<Value> {
        let vars = json!({"p": self.project, "scope": self.scope()});
        let (list, _, _) = tokio::join!(
            self.page(tally, "list", LIST, vars),
            self.page(tally, "panels", PANELS, json!({"p": self.project})),
            self.page(tally, "settings", SETTINGS, json!({})),
        );
        list
    }

    async fn subscribe(&self, tally: Arc<Tally>) -> bool {
        let Ok(mut request) = format!("ws://{}/graphql/ws", self.base).into_client_request() else { return false };
        request.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static("graphql-transport-ws"));
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4 << 10);
        let Ok((mut ws, _)) = tokio_tungstenite::connect_async_with_config(request, Some(config), true).await else {
            return false;
        };
        let init = json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {}", self.token)}});
        if ws.send(Message::Text(init.to_string().into())).await.is_err() {
            return false;
        }
        let mut acked = false;
        while let Some(Ok(msg)) = ws.next().await {
            if let Message::Text(t) = msg
                && t.as_str().contains("connection_ack")
            {
                acked = true;
                break;
            }
        }
        let sub = json!({"type": "subscribe", "id": "events", "payload": {"query": EVENTS, "variables": {"p": self.project}}});
        if !acked || ws.send(Message::Text(sub.to_string().into())).await.is_err() {
            return false;
        }
        tokio::spawn(async move {
            while let Some(msg) = ws.next().await {
                match msg {
                    Ok(Message::Text(t)) if t.as_str().contains("\"next\"") => {
                        tally.events.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Message::Text(t)) if t.as_str().contains("\"error\"") || t.as_str().contains("\"complete\"") => {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Ok(Message::Close(_)) | Err(_) => {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Ok(_) => {}
                }
            }
        });
        true
    }

    /// The user at work until `until`: every 2–6 s a launch, a termination of one of their
    /// sessions, or the list again (its next page when there is one).
    async fn work(self, tally: Arc<Tally>, until: Instant) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.i as u64);
        let mut mine: Vec<String> = Vec::new();
        let mut after: Option<String> = None;
        let mut n = 0;
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(rng.random_range(2000..6000))).await;
            if Instant::now() >= until {
                return;
            }
            match rng.random_range(0..10) {
                0..=2 => {
                    n += 1;
                    let input = json!({"projectId": self.project, "name": format!("load-{}-{n}", self.i),
                        "image": "python:3.12",
                        "resources": [{"slot": "cpu", "amount": 0.5}, {"slot": "mem", "amount": 1_i64 << 30}]});
                    match self.post(LAUNCH, json!({"i": input})).await {
                        Some((v, ms)) => {
                            tally.actions.lock().expect("tally").push(ms);
                            match v["data"]["launchSession"]["session"]["id"].as_str() {
                                Some(id) => mine.push(id.to_owned()),
                                None => {
                                    if tally.refused.fetch_add(1, Ordering::Relaxed) == 0 {
                                        eprintln!("a launch refused: {}", v["errors"][0]["message"]);
                                    }
                                }
                            }
                        }
                        None => {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                3..=5 if !mine.is_empty() => {
                    let id = mine.remove(0);
                    match self.post(TERMINATE, json!({"ids": [id]})).await {
                        Some((v, ms)) if v.get("errors").is_none() => tally.actions.lock().expect("tally").push(ms),
                        _ => {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                _ => {
                    let vars = json!({"p": self.project, "scope": self.scope(), "after": after});
                    let list = self.page(&tally, "list", LIST, vars).await;
                    after = list.and_then(|v| {
                        let info = &v["data"]["sessions"]["pageInfo"];
                        info["hasNextPage"]
                            .as_bool()
                            .filter(|more| *more)
                            .and(info["endCursor"].as_str().map(str::to_owned))
                    });
                }
            }
        }
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::main]
async fn main() {
    let a = args();
    stamp(&format!(
        "cargo bench --bench page_load -- --users {} --seconds {} --backend {}",
        a.users, a.seconds, a.backend
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let declaration = dir.path().join("users.toml");
    std::fs::write(&declaration, users_declaration(a.users)).expect("declaration");
    let declaration = declaration.display().to_string();
    let t = Instant::now();
    let server = Server::start_with(
        &a.backend,
        &[&["apply", "-f", &declaration], &["generate", "--sessions", "100000"]],
        &["--runtime", "simulated", "--max-ws-connections", "5000", "--sim-step-ms", "200", "--sim-batch-ms", "5000"],
    )
    .await;
    eprintln!("server up on 100 000 sessions in {:.0} s", t.elapsed().as_secs_f64());
    let project = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let http = reqwest::Client::builder().pool_max_idle_per_host(4096).build().expect("client");
    let users: Vec<User> = (0..a.users)
        .map(|i| User {
            i,
            token: format!("load-user-{i:04}"),
            admin: i % 50 == 0,
            http: http.clone(),
            base: server.base.clone(),
            project: project.clone(),
        })
        .collect();
    // Warm up: every pooled connection open, every path prepared once.
    for u in users.iter().take(16) {
        u.open(&Tally::default()).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_kib = server.rss_kib();
    let tally = Arc::new(Tally::default());
    // Users arrive over 20 s, each opening the page and its subscription at once.
    let ramp = Duration::from_secs(20);
    let started = Instant::now();
    let until = started + ramp + Duration::from_secs(a.seconds);
    let mut tasks = Vec::new();
    for (k, u) in users.into_iter().enumerate() {
        let tally = tally.clone();
        let at = started + ramp.mul_f64(k as f64 / a.users as f64);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let (_, subscribed) = tokio::join!(u.open(&tally), u.subscribe(tally.clone()));
            if !subscribed {
                tally.errors.fetch_add(1, Ordering::Relaxed);
            }
            tally.opened.fetch_add(1, Ordering::Relaxed);
            u.work(tally, until).await;
        }));
    }
    tokio::time::sleep_until((started + ramp + Duration::from_secs(5)).into()).await;
    let with_users_kib = server.rss_kib();
    let load_then = load_average();
    for t in tasks {
        let _ = t.await;
    }
    let load_end = load_average();
    let page = tally.page.lock().expect("tally").clone();
    let ms: Vec<f64> = page.iter().map(|p| p.1).collect();
    let actions = tally.actions.lock().expect("tally").clone();
    println!(
        "| backend | users | opened | page requests | p50 (ms) | p99 (ms) | max (ms) | actions | action p99 (ms) | errors | refused launches | events delivered | KiB per user | load average (mid / end) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let p = |xs: &[f64], q: f64| if xs.is_empty() { 0.0 } else { percentile(xs.to_vec(), q) };
    println!(
        "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {} | {} | {} | {:.0} | {load_then} / {load_end} |",
        a.backend,
        a.users,
        tally.opened.load(Ordering::Relaxed),
        ms.len(),
        p(&ms, 0.5),
        p(&ms, 0.99),
        ms.iter().copied().fold(0.0, f64::max),
        actions.len(),
        p(&actions, 0.99),
        tally.errors.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
        tally.events.load(Ordering::Relaxed),
        (with_users_kib.saturating_sub(before_kib)) as f64 / a.users as f64,
    );
    for name in ["list", "panels", "settings"] {
        let xs: Vec<f64> = page.iter().filter(|p| p.0 == name).map(|p| p.1).collect();
        println!("- {name}: {} requests, p50 {:.1} ms, p99 {:.1} ms", xs.len(), p(&xs, 0.5), p(&xs, 0.99));
    }
}
